# One random resource and one output: the module of the throughput figures (an apply is almost
# all Terraform's own work: start, read state, plan, apply, write state).
terraform {
  required_providers {
    random = {
      source  = "hashicorp/random"
      version = ">= 3.0.0"
    }
  }
}

variable "prefix" {
  type        = string
  description = "Prefix of the generated name."
}

resource "random_pet" "this" {
  prefix = var.prefix
}

output "name" {
  value = random_pet.this.id
}
