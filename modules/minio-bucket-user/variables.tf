variable "bucket" {
  type        = string
  description = "Bucket to make, and the name of the user that alone may use it (S3 bucket naming: 3 to 63 lower-case letters, digits, dots and hyphens)."
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket))
    error_message = "bucket must be 3 to 63 lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit."
  }
}

variable "namespace" {
  type        = string
  description = "Namespace the user's Job runs in: the object store's own (the rook-minio module's namespace output, a shared resource's output under sharing)."
}

variable "endpoint" {
  type        = string
  description = "S3 endpoint of the object store (the rook-minio module's endpoint output)."
}

variable "admin_access_key" {
  type        = string
  description = "Access key of the object store's administrator (the rook-minio module's access_key output)."
}

variable "admin_secret_key" {
  type        = string
  sensitive   = true
  description = "Secret key of the object store's administrator (the rook-minio module's secret_key output): read at run time from the shared resource's connection Secret, never written into any object but the Job's Secret."
}

variable "client_image" {
  type        = string
  default     = "conductor-tf/s3client:v0.1.0"
  description = "Image of cmd/s3client, which makes the bucket and the user."
}

variable "labels" {
  type        = map(string)
  default     = {}
  description = "Labels of every object the module makes (the ownership mark)."
}
