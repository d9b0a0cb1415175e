# Objects that live only in state (hashicorp/random), one of them with a provisioner: a create
# of the plain one touches nothing outside state, the provisioner does.
terraform {
  required_providers {
    random = {
      source  = "hashicorp/random"
      version = ">= 3.0.0"
    }
  }
}

resource "random_pet" "plain" {}

resource "random_id" "provisioned" {
  byte_length = 4

  provisioner "local-exec" {
    command = "true"
  }
}
