# A module with real providers and no cloud: a file whose path and content come from the claim,
# and a generated password that only the connection Secret may hold.
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

variable "mode" {
  type        = number
  default     = 644
  description = "Permission bits of the file, as an octal number."
}

variable "secret_word" {
  type        = string
  default     = ""
  sensitive   = true
  description = "Appended to the file when set (tests Secret inputs)."
}

resource "random_password" "this" {
  length  = 20
  special = false
}

resource "local_file" "this" {
  filename        = var.path
  content         = var.secret_word == "" ? var.content : "${var.content}\n${var.secret_word}"
  file_permission = format("%04d", var.mode)
}

output "path" {
  value       = local_file.this.filename
  description = "The file's path."
}

output "content_sha256" {
  value = local_file.this.content_sha256
}

output "password" {
  value     = random_password.this.result
  sensitive = true
}
