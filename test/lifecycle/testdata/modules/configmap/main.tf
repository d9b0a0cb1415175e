# A ConfigMap, as a class manages one: the discovery spec's class module. Runs reach the API
# through the class's kubernetesAccess only.
terraform {
  required_providers {
    kubernetes = {
      source = "hashicorp/kubernetes"
    }
  }
}

variable "name" {
  type = string
}

variable "namespace" {
  type = string
}

variable "labels" {
  type    = map(string)
  default = {}
}

variable "extra_labels" {
  type    = map(string)
  default = {}
}

variable "data" {
  type    = map(string)
  default = {}
}

resource "kubernetes_config_map_v1" "this" {
  metadata {
    name      = var.name
    namespace = var.namespace
    labels    = merge(var.labels, var.extra_labels)
  }
  data = var.data
}

output "uid" {
  value = kubernetes_config_map_v1.this.metadata[0].uid
}
