# A bucket in an object store another claim made (the rook-minio module): the store's endpoint and
# keys come from that claim's outputs (spec.parametersFrom), and a Job in the store's namespace makes
# the bucket with them. The outputs are what an application needs to use the bucket.

resource "kubernetes_secret_v1" "keys" {
  metadata {
    name      = "${var.bucket}-bucket-keys"
    namespace = var.namespace
    labels    = var.labels
  }
  data = {
    access_key = var.access_key
    secret_key = var.secret_key
  }
}

resource "kubernetes_job_v1" "bucket" {
  metadata {
    name      = "${var.bucket}-make-bucket"
    namespace = var.namespace
    labels    = var.labels
  }
  spec {
    backoff_limit = 6
    template {
      metadata {
        labels = merge(var.labels, { "app.kubernetes.io/name" = "minio-bucket", "app.kubernetes.io/instance" = var.bucket })
      }
      spec {
        restart_policy                  = "Never"
        automount_service_account_token = false
        security_context {
          run_as_non_root = true
          run_as_user     = 65534
          seccomp_profile {
            type = "RuntimeDefault"
          }
        }
        container {
          name              = "make-bucket"
          image             = var.client_image
          image_pull_policy = "IfNotPresent"
          args              = ["make-bucket", "--wait", "2m"]
          env {
            name  = "S3_ENDPOINT"
            value = var.endpoint
          }
          env {
            name  = "S3_BUCKET"
            value = var.bucket
          }
          env {
            name = "S3_ACCESS_KEY"
            value_from {
              secret_key_ref {
                name = kubernetes_secret_v1.keys.metadata[0].name
                key  = "access_key"
              }
            }
          }
          env {
            name = "S3_SECRET_KEY"
            value_from {
              secret_key_ref {
                name = kubernetes_secret_v1.keys.metadata[0].name
                key  = "secret_key"
              }
            }
          }
          security_context {
            allow_privilege_escalation = false
            read_only_root_filesystem  = true
            capabilities {
              drop = ["ALL"]
            }
          }
        }
      }
    }
  }
  wait_for_completion = true
  timeouts {
    create = "5m"
    update = "5m"
  }
}
