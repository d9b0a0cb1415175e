variable "name" {
  type        = string
  description = "Globally unique bucket name."

  validation {
    condition     = can(regex("^[a-z0-9][-a-z0-9_.]{1,61}[a-z0-9]$", var.name))
    error_message = "name must be 3-63 characters of lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or digit."
  }
}

variable "project" {
  type        = string
  description = "Google Cloud project of the bucket."
}

variable "location" {
  type        = string
  default     = "EU"
  description = "Location: a multi-region (EU, US, ASIA), dual-region or region (e.g. EUROPE-WEST1)."
}

variable "storage_class" {
  type        = string
  default     = "STANDARD"
  description = "Default storage class of objects."

  validation {
    condition     = contains(["STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE"], var.storage_class)
    error_message = "storage_class must be STANDARD, NEARLINE, COLDLINE or ARCHIVE."
  }
}

variable "versioning" {
  type        = bool
  default     = false
  description = "Keep noncurrent versions of objects."
}

variable "uniform_bucket_level_access" {
  type        = bool
  default     = true
  description = "Use IAM only (no object ACLs)."
}

variable "lifecycle_rules" {
  type = list(object({
    age_days      = number
    action        = string
    storage_class = optional(string)
  }))
  default     = []
  description = "Lifecycle rules: after age_days, Delete objects or SetStorageClass to storage_class."

  validation {
    condition = alltrue([for r in var.lifecycle_rules :
      r.age_days >= 0 && contains(["Delete", "SetStorageClass"], r.action) &&
    (r.action != "SetStorageClass" || r.storage_class != null)])
    error_message = "Each lifecycle rule needs age_days >= 0 and action Delete, or SetStorageClass with a storage_class."
  }
}

variable "labels" {
  type        = map(string)
  default     = {}
  description = "Labels of the bucket."
}
