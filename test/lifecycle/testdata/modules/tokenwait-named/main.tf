# tokenwait with a name: the Secret's import identity is "<namespace>/<name>", so that a create a
# dead run had started can be looked up (interruptedCreates: Resolve). Also objects that live only
# in state (terraform_data without provisioners, random_pet), created before it: never in doubt.
terraform {
  required_providers {
    kubernetes = {
      source = "hashicorp/kubernetes"
    }
    random = {
      source = "hashicorp/random"
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

variable "label" {
  type        = string
  description = "Value of the conductor.io/ledger label, and of the ownership mark conductor.io/resource, on every Secret this module creates (the resource's name)."
}

resource "terraform_data" "first" {
  input = var.name
}

resource "random_pet" "suffix" {}

resource "kubernetes_secret_v1" "token" {
  metadata {
    name        = var.name
    namespace   = var.namespace
    labels      = { "conductor.io/ledger" = var.label, "suffix" = random_pet.suffix.id, "conductor.io/resource" = var.label }
    annotations = { "kubernetes.io/service-account.name" = "default" }
  }
  type                           = "kubernetes.io/service-account-token"
  wait_for_service_account_token = true
  depends_on                     = [terraform_data.first]
}
