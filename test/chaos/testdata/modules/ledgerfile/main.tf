# The chaos test's module: the file module's two objects (a file whose content follows the claim,
# a generated password for the connection Secret) and a create that takes seconds and records
# itself in a ledger outside Terraform, so that every creation is counted whatever the state says.
terraform {
  required_providers {
    local = {
      source  = "hashicorp/local"
      version = ">= 2.4.0"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 3.5.0"
    }
  }
}

variable "path" {
  type        = string
  description = "Absolute path of the file."
}

variable "content" {
  type        = string
  description = "Content of the file."
}

variable "ledger" {
  type        = string
  description = "Absolute path of the ledger: one line per creation of the slow object."
}

variable "seconds" {
  type        = number
  default     = 3
  description = "How long the slow object's create takes after it is recorded, in seconds."
}

resource "random_password" "this" {
  length  = 20
  special = false
}

resource "local_file" "this" {
  filename = var.path
  content  = var.content
}

resource "terraform_data" "slow" {
  input = var.ledger

  provisioner "local-exec" {
    command = "echo created >> \"$LEDGER\" && sleep $SECONDS"
    environment = {
      LEDGER  = var.ledger
      SECONDS = tostring(var.seconds)
    }
  }
}

output "path" {
  value = local_file.this.filename
}

output "password" {
  value     = random_password.this.result
  sensitive = true
}
