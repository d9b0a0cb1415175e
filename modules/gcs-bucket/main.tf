# A Google Cloud Storage bucket with versioning, lifecycle rules and uniform access, never public
# (public access prevention enforced, as the samples' plan policy in
# config/samples/bucket_class.yaml requires).
resource "google_storage_bucket" "this" {
  name                        = var.name
  project                     = var.project
  location                    = var.location
  storage_class               = var.storage_class
  uniform_bucket_level_access = var.uniform_bucket_level_access
  public_access_prevention    = "enforced"
  labels                      = merge(var.labels, { "managed-by" = "conductor-tf" })

  versioning {
    enabled = var.versioning
  }

  dynamic "lifecycle_rule" {
    for_each = var.lifecycle_rules
    content {
      condition {
        age = lifecycle_rule.value.age_days
      }
      action {
        type          = lifecycle_rule.value.action
        storage_class = lifecycle_rule.value.storage_class
      }
    }
  }
}
