# A module that takes a password the way modules/aws-rds does: through an ephemeral variable, into
# a write-only attribute with a version. Its object is a Kubernetes Secret (kubernetes_secret_v1's
# data_wo, sent when data_wo_revision changes), so the password can be read back where it landed.
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

variable "password" {
  type        = string
  ephemeral   = true
  sensitive   = true
  description = "The password: never in plan or state."
}

variable "password_version" {
  type        = number
  description = "Changes whenever the password does."
}

variable "plain" {
  type        = string
  default     = ""
  description = "Not ephemeral: a password given here would be stored (a run refuses it)."
}

resource "kubernetes_secret_v1" "this" {
  metadata {
    name      = var.name
    namespace = var.namespace
  }
  data_wo          = { password = var.password }
  data_wo_revision = var.password_version
}

output "secret" {
  value = "${kubernetes_secret_v1.this.metadata[0].namespace}/${kubernetes_secret_v1.this.metadata[0].name}"
}
