# A module that manages Kubernetes objects with the kubernetes provider, configured by nothing but
# its environment (KUBE_CONFIG_PATH): a ConfigMap in var.namespace and, when var.read_secret is set,
# a read of that Secret.
terraform {
  required_providers {
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = ">= 2.23.0, < 4.0.0"
    }
  }
}

variable "namespace" {
  type        = string
  description = "Namespace of the ConfigMap."
}

variable "name" {
  type        = string
  description = "Name of the ConfigMap."
}

variable "read_secret" {
  type        = string
  default     = ""
  description = "namespace/name of a Secret to read; empty reads none."
}

provider "kubernetes" {}

resource "kubernetes_config_map_v1" "this" {
  metadata {
    name      = var.name
    namespace = var.namespace
  }
  data = {
    written-by = "conductor-tf run"
  }
}

data "kubernetes_secret_v1" "read" {
  count = var.read_secret == "" ? 0 : 1
  metadata {
    namespace = split("/", var.read_secret)[0]
    name      = split("/", var.read_secret)[1]
  }
}

output "config_map" {
  value = "${kubernetes_config_map_v1.this.metadata[0].namespace}/${kubernetes_config_map_v1.this.metadata[0].name}"
}
