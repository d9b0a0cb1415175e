# The discovery spec's discovery module: data sources only. It lists the ConfigMaps of a namespace
# that a label selector selects, each as a candidate for the configmap module: its import ID and
# the variables that describe it as it is (plus extra_labels, for a class whose module would
# change what it found).
terraform {
  required_providers {
    kubernetes = {
      source = "hashicorp/kubernetes"
    }
  }
}

variable "namespace" {
  type = string
}

variable "selector" {
  type = string
}

variable "extra_labels" {
  type    = map(string)
  default = {}
}

data "kubernetes_resources" "found" {
  api_version    = "v1"
  kind           = "ConfigMap"
  namespace      = var.namespace
  label_selector = var.selector
}

output "candidates" {
  value = [for o in data.kubernetes_resources.found.objects : {
    id         = "${o.metadata.namespace}/${o.metadata.name}"
    import_ids = { "kubernetes_config_map_v1.this" = "${o.metadata.namespace}/${o.metadata.name}" }
    variables = {
      name         = o.metadata.name
      namespace    = o.metadata.namespace
      labels       = o.metadata.labels
      data         = try(o.data, {})
      extra_labels = var.extra_labels
    }
  }]
}
