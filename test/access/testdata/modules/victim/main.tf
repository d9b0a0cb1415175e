# Another class's module, in another namespace: a random provider (kept warm by the suite's
# controller) and nothing else.
terraform {
  required_providers {
    random = {
      source  = "hashicorp/random"
      version = ">= 3.5.0"
    }
  }
}

variable "prefix" {
  type        = string
  description = "Prefix of the name."
}

resource "random_pet" "this" {
  prefix = var.prefix
}

output "name" {
  value = random_pet.this.id
}
