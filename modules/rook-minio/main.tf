# An in-cluster S3-compatible object store: Rook's MinIO ObjectStore, its namespace and its
# generated credentials, all through the hashicorp/kubernetes provider.
locals {
  labels = merge(var.labels, {
    "app.kubernetes.io/name"       = "minio"
    "app.kubernetes.io/instance"   = var.name
    "app.kubernetes.io/managed-by" = "conductor-tf"
  })
  credentials_name = "minio-${var.name}-access-keys"
  secret_key       = var.secret_key != "" ? var.secret_key : random_password.secret_key[0].result
}

resource "kubernetes_namespace_v1" "this" {
  metadata {
    name   = var.namespace
    labels = local.labels
  }
}

resource "random_password" "secret_key" {
  count   = nonsensitive(var.secret_key == "") ? 1 : 0
  length  = 32
  special = false
}

resource "kubernetes_secret_v1" "credentials" {
  metadata {
    name      = local.credentials_name
    namespace = kubernetes_namespace_v1.this.metadata[0].name
    labels    = local.labels
  }

  data = {
    username = var.access_key
    password = local.secret_key
  }
}

resource "kubernetes_manifest" "object_store" {
  manifest = {
    apiVersion = "minio.rook.io/v1alpha1"
    kind       = "ObjectStore"
    metadata = {
      name      = var.name
      namespace = kubernetes_namespace_v1.this.metadata[0].name
      labels    = local.labels
    }
    spec = {
      scope = {
        nodeCount = var.node_count
        volumeClaimTemplates = [{
          metadata = { name = "${var.name}-data" }
          spec = {
            accessModes = ["ReadWriteOnce"]
            resources   = { requests = { storage = "${var.storage_gib}Gi" } }
          }
        }]
      }
      credentials = {
        name      = kubernetes_secret_v1.credentials.metadata[0].name
        namespace = kubernetes_secret_v1.credentials.metadata[0].namespace
      }
      clusterDomain = var.cluster_domain
    }
  }
}
