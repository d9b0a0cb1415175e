# The e2e suite's ledger module: each apply that creates it writes a ConfigMap with a generated
# name (the ledger: one per creation, whatever Terraform's state says; two for one claim is an
# object created twice) and then a create that takes var.seconds, long enough to restart the
# manager in. Runs reach the API through the class's kubernetesAccess only.
terraform {
  required_providers {
    kubernetes = {
      source = "hashicorp/kubernetes"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 3.5.0"
    }
  }
}

variable "name" {
  type = string
}

variable "namespace" {
  type = string
}

variable "seconds" {
  type    = number
  default = 20
}

resource "random_password" "this" {
  length  = 24
  special = false
}

resource "kubernetes_config_map_v1" "ledger" {
  metadata {
    generate_name = "created-"
    namespace     = var.namespace
    labels        = { "conductor.io/ledger" = var.name }
  }
}

resource "terraform_data" "slow" {
  depends_on = [kubernetes_config_map_v1.ledger]

  provisioner "local-exec" {
    command = "sleep ${var.seconds}"
  }
}

output "password" {
  value     = random_password.this.result
  sensitive = true
}
