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

variable "length" {
  type        = number
  default     = 2
  description = "Number of words in the generated name."
}

resource "random_pet" "this" {
  prefix = var.prefix
  length = var.length
}

resource "random_password" "this" {
  length = 16
}

output "name" {
  value       = random_pet.this.id
  description = "The generated name."
}

output "password" {
  value     = random_password.this.result
  sensitive = true
}
