variable "bucket" {
  type        = string
  description = "Bucket to make in the object store (S3 bucket naming: 3 to 63 lower-case letters, digits, dots and hyphens)."
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket))
    error_message = "bucket must be 3 to 63 lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit."
  }
}

variable "namespace" {
  type        = string
  description = "Namespace the bucket Job runs in: the object store's own (the rook-minio module's namespace output)."
}

variable "endpoint" {
  type        = string
  description = "S3 endpoint of the object store (the rook-minio module's endpoint output)."
}

variable "access_key" {
  type        = string
  description = "Access key of the object store's administrator (the rook-minio module's access_key output)."
}

variable "secret_key" {
  type        = string
  default     = ""
  sensitive   = true
  description = "Secret key of the object store's administrator (the rook-minio module's secret_key output, a sensitive input: passed from the store claim's connection Secret, never written into any object). It has a default only so that a class may leave it to a claim's parametersFrom; empty is refused."
  validation {
    condition     = var.secret_key != ""
    error_message = "secret_key is required: read it from the object store claim (spec.parametersFrom)."
  }
}

variable "client_image" {
  type        = string
  default     = "conductor-tf/s3client:v0.1.0"
  description = "Image of cmd/s3client, which makes the bucket."
}

variable "labels" {
  type        = map(string)
  default     = {}
  description = "Labels of every object the module makes (the ownership mark)."
}
