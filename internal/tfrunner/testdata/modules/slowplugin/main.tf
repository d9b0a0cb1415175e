# A provider plugin that is running while a provisioner sleeps: for testing that nothing of a
# killed run (plugins, provisioners) outlives it.
terraform {
  required_providers {
    random = {
      source  = "hashicorp/random"
      version = ">= 3.5.0"
    }
  }
}

resource "random_pet" "this" {}

resource "terraform_data" "slow" {
  input = random_pet.this.id
  provisioner "local-exec" {
    command = "sleep 60"
  }
}
