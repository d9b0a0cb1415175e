# A create that takes a while inside the provider and leaves an object anyone can look up: a named
# ServiceAccount token Secret whose token the test fills about 3 s after it is made (no token
# controller runs on the suite's control plane), so the kubernetes provider's create waits that
# long with the Secret already made. Its import ID is "<namespace>/<name>".
terraform {
  required_providers {
    kubernetes = {
      source = "hashicorp/kubernetes"
    }
  }
}

variable "namespace" {
  type        = string
  description = "Namespace of the Secret."
}

variable "name" {
  type        = string
  description = "Name of the Secret."
}

variable "ledger" {
  type        = string
  description = "Value of the conductor.io/ledger label: the Secrets so labelled are a ledger of creations."
}

resource "kubernetes_secret_v1" "token" {
  metadata {
    name        = var.name
    namespace   = var.namespace
    labels      = { "conductor.io/ledger" = var.ledger }
    annotations = { "kubernetes.io/service-account.name" = "default" }
  }
  type                           = "kubernetes.io/service-account-token"
  wait_for_service_account_token = true
}
