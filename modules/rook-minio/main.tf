# An in-cluster S3-compatible object store, through the hashicorp/kubernetes provider.
#
# server = "minio" (the default): a MinIO server this module runs itself (a Deployment with one
# PersistentVolumeClaim of storage_gib, a Service on port 9000, generated root credentials), waits
# until it answers its readiness check, then creates the bucket with a Job. It needs nothing
# installed in the cluster but a kubelet and a default StorageClass.
#
# server = "rook-objectstore": a Rook-style operator's ObjectStore (minio.rook.io/v1alpha1) object
# instead, for clusters that install that kind; the operator runs the servers.
locals {
  labels = merge(var.labels, {
    "app.kubernetes.io/name"       = "minio"
    "app.kubernetes.io/instance"   = var.name
    "app.kubernetes.io/managed-by" = "conductor-tf"
  })
  selector         = { "app.kubernetes.io/name" = "minio", "app.kubernetes.io/instance" = var.name }
  credentials_name = "minio-${var.name}-access-keys"
  secret_key       = var.secret_key != "" ? var.secret_key : random_password.secret_key[0].result
  run_server       = var.server == "minio"
  bucket           = var.bucket != "" ? var.bucket : var.name
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
