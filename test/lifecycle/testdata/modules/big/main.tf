# A state that does not fit one Secret: random bytes (incompressible) in both their base64 and hex
# forms, about 130 KiB of gzip per instance, over 4 MiB of gzip with the default count.
terraform {
  required_providers {
    random = {
      source  = "hashicorp/random"
      version = ">= 3.5.0"
    }
  }
}

variable "instances" {
  type        = number
  default     = 40
  description = "How many 64 KiB random byte strings to keep in state."
}

resource "random_bytes" "this" {
  count  = var.instances
  length = 65536
}

output "instances" {
  value = length(random_bytes.this)
}
