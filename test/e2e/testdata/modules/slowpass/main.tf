# The e2e suite's module: a generated password (the connection Secret's; a password that changes is
# one created twice) and an object whose create takes var.seconds and is replaced whenever
# var.greeting changes, so that every change is an apply long enough to kill the manager in.
terraform {
  required_providers {
    random = {
      source  = "hashicorp/random"
      version = ">= 3.5.0"
    }
  }
}

variable "name" {
  type = string
}

variable "greeting" {
  type = string
}

variable "seconds" {
  type    = number
  default = 6
}

resource "random_password" "this" {
  length  = 24
  special = false
  keepers = {
    name = var.name
  }
}

resource "terraform_data" "slow" {
  triggers_replace = [var.greeting]

  provisioner "local-exec" {
    command = "sleep ${var.seconds}"
  }
}

output "greeting" {
  value = terraform_data.slow.triggers_replace[0]
}

output "password" {
  value     = random_password.this.result
  sensitive = true
}
