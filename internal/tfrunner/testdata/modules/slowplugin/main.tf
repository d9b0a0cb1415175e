# A provider plugin that is running while a provisioner sleeps: the local provider stays open
# until local_file.after, which waits for the sleep, is created. For testing that nothing of a
# killed run (plugins, provisioners) outlives it.
terraform {
  required_providers {
    local = {
      source  = "hashicorp/local"
      version = ">= 2.4.0"
    }
  }
}

resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "sleep 60"
  }
}

resource "local_file" "after" {
  filename = "${path.root}/after.txt"
  content  = terraform_data.slow.id
}
