# A bucket and a user of its own in an object store that several claims share (a sharing class's
# per-claim module, docs/sharing.md): the store's endpoint and administrator keys are the shared
# resource's outputs; a Job in the store's namespace makes the bucket, a policy that allows that
# bucket alone, and the user with a secret key generated here. The outputs are the user's keys:
# with them an application reads and writes its bucket and no other.

resource "random_password" "user" {
  length  = 40
  special = false
}

resource "kubernetes_secret_v1" "keys" {
  metadata {
    name      = "${var.bucket}-user-keys"
    namespace = var.namespace
    labels    = var.labels
  }
  data = {
    admin_access_key = var.admin_access_key
    admin_secret_key = var.admin_secret_key
    user_secret_key  = random_password.user.result
  }
}

resource "kubernetes_job_v1" "user" {
  metadata {
    name      = "${var.bucket}-make-user"
    namespace = var.namespace
    labels    = var.labels
  }
  spec {
    backoff_limit = 6
    template {
      metadata {
        labels = merge(var.labels, { "app.kubernetes.io/name" = "minio-bucket-user", "app.kubernetes.io/instance" = var.bucket })
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
          name              = "make-user"
          image             = var.client_image
          image_pull_policy = "IfNotPresent"
          args              = ["make-user", "--wait", "2m", var.bucket]
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
                key  = "admin_access_key"
              }
            }
          }
          env {
            name = "S3_SECRET_KEY"
            value_from {
              secret_key_ref {
                name = kubernetes_secret_v1.keys.metadata[0].name
                key  = "admin_secret_key"
              }
            }
          }
          env {
            name = "S3_USER_SECRET_KEY"
            value_from {
              secret_key_ref {
                name = kubernetes_secret_v1.keys.metadata[0].name
                key  = "user_secret_key"
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
