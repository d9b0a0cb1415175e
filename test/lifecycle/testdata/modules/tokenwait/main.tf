# A create that waits inside the provider: a ServiceAccount token Secret whose token nothing fills
# (no token controller runs on the suite's control plane), so the kubernetes provider's create has
# made the Secret and waits for its token. Each create makes a new Secret (generate_name), labelled
# with var.label: the Secrets are a ledger of creations outside Terraform.
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

variable "label" {
  type        = string
  description = "Value of the conductor.io/ledger label on every Secret this module creates."
}

resource "kubernetes_secret_v1" "token" {
  metadata {
    generate_name = "token-"
    namespace     = var.namespace
    labels        = { "conductor.io/ledger" = var.label }
    annotations   = { "kubernetes.io/service-account.name" = "default" }
  }
  type                           = "kubernetes.io/service-account-token"
  wait_for_service_account_token = true
}
