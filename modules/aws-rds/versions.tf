terraform {
  # Ephemeral variables and write-only attributes: OpenTofu 1.11, Terraform 1.11.
  required_version = ">= 1.11.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      # password_wo: 5.87.
      version = ">= 5.87.0, < 7.0.0"
    }
  }
}
