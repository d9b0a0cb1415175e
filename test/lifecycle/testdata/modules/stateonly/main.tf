# Objects that live only in Terraform's state, many of them, so that an apply takes long enough to be
# killed in the middle: creating any of them again duplicates nothing anywhere (issue 35, case a).
terraform {
  required_providers {
    random = {
      source = "hashicorp/random"
    }
  }
}

variable "count_each" {
  type        = number
  default     = 1000
  description = "How many objects of each type."
}

resource "random_id" "many" {
  count       = var.count_each
  byte_length = 8
}

resource "terraform_data" "many" {
  count = var.count_each
  input = count.index
}
