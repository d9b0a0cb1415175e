# server = "minio": the MinIO server, its volume and its Service, and the claim's bucket.

resource "kubernetes_persistent_volume_claim_v1" "data" {
  count = local.run_server ? 1 : 0
  metadata {
    name      = "${var.name}-data"
    namespace = kubernetes_namespace_v1.this.metadata[0].name
    labels    = local.labels
  }
  spec {
    access_modes       = ["ReadWriteOnce"]
    storage_class_name = var.storage_class_name
    resources {
      requests = { storage = "${var.storage_gib}Gi" }
    }
  }
  # A WaitForFirstConsumer class binds the claim only once the server's pod is scheduled.
  wait_until_bound = false
}

resource "kubernetes_deployment_v1" "server" {
  count = local.run_server ? 1 : 0
  metadata {
    name      = var.name
    namespace = kubernetes_namespace_v1.this.metadata[0].name
    labels    = local.labels
  }
  spec {
    replicas = 1
    selector {
      match_labels = local.selector
    }
    # One ReadWriteOnce volume: the old pod goes before the new one starts.
    strategy {
      type = "Recreate"
    }
    template {
      metadata {
        labels = local.labels
      }
      spec {
        automount_service_account_token = false
        security_context {
          run_as_non_root = true
          run_as_user     = 1000
          run_as_group    = 1000
          fs_group        = 1000
          seccomp_profile {
            type = "RuntimeDefault"
          }
        }
        container {
          name              = "minio"
          image             = var.image
          image_pull_policy = "IfNotPresent"
          command           = ["minio", "server", "/data", "--address", ":9000", "--console-address", ":9001"]
          env {
            name = "MINIO_ROOT_USER"
            value_from {
              secret_key_ref {
                name = kubernetes_secret_v1.credentials.metadata[0].name
                key  = "username"
              }
            }
          }
          env {
            name = "MINIO_ROOT_PASSWORD"
            value_from {
              secret_key_ref {
                name = kubernetes_secret_v1.credentials.metadata[0].name
                key  = "password"
              }
            }
          }
          # MinIO keeps its certificates directory under $HOME.
          env {
            name  = "HOME"
            value = "/tmp"
          }
          port {
            name           = "s3"
            container_port = 9000
          }
          readiness_probe {
            http_get {
              path = "/minio/health/ready"
              port = "s3"
            }
            period_seconds = 2
          }
          liveness_probe {
            http_get {
              path = "/minio/health/live"
              port = "s3"
            }
            initial_delay_seconds = 10
            period_seconds        = 10
          }
          resources {
            requests = { cpu = "50m", memory = "128Mi" }
            limits   = { memory = var.memory_limit }
          }
          security_context {
            allow_privilege_escalation = false
            read_only_root_filesystem  = true
            capabilities {
              drop = ["ALL"]
            }
          }
          volume_mount {
            name       = "data"
            mount_path = "/data"
          }
          volume_mount {
            name       = "tmp"
            mount_path = "/tmp"
          }
        }
        volume {
          name = "data"
          persistent_volume_claim {
            claim_name = kubernetes_persistent_volume_claim_v1.data[0].metadata[0].name
          }
        }
        volume {
          name = "tmp"
          empty_dir {}
        }
      }
    }
  }
  # The apply returns once the server answers its readiness check.
  wait_for_rollout = true
  timeouts {
    create = var.ready_timeout
    update = var.ready_timeout
  }
}

resource "kubernetes_service_v1" "server" {
  count = local.run_server ? 1 : 0
  metadata {
    name      = var.name
    namespace = kubernetes_namespace_v1.this.metadata[0].name
    labels    = local.labels
  }
  spec {
    selector = local.selector
    port {
      name        = "s3"
      port        = 9000
      target_port = "s3"
    }
  }
}

# The claim's bucket, made once the server serves, by a Job of an S3 client (cmd/s3client); the Job
# is idempotent: an existing bucket is kept.
resource "kubernetes_job_v1" "bucket" {
  count = local.run_server ? 1 : 0
  metadata {
    name      = "${var.name}-bucket"
    namespace = kubernetes_namespace_v1.this.metadata[0].name
    labels    = local.labels
  }
  spec {
    backoff_limit = 6
    template {
      metadata {
        labels = merge(var.labels, { "app.kubernetes.io/name" = "minio-bucket", "app.kubernetes.io/instance" = var.name })
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
            value = "http://${kubernetes_service_v1.server[0].metadata[0].name}.${var.namespace}.svc:9000"
          }
          env {
            name  = "S3_BUCKET"
            value = local.bucket
          }
          env {
            name = "S3_ACCESS_KEY"
            value_from {
              secret_key_ref {
                name = kubernetes_secret_v1.credentials.metadata[0].name
                key  = "username"
              }
            }
          }
          env {
            name = "S3_SECRET_KEY"
            value_from {
              secret_key_ref {
                name = kubernetes_secret_v1.credentials.metadata[0].name
                key  = "password"
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
    create = var.ready_timeout
    update = var.ready_timeout
  }
  depends_on = [kubernetes_deployment_v1.server]
}
