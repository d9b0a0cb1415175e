variable "name" {
  type        = string
  description = "Name of the object store; also names its credentials Secret."

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$", var.name))
    error_message = "name must be a DNS label of at most 42 characters (lowercase letters, digits, '-')."
  }
}

variable "namespace" {
  type        = string
  description = "Namespace created for the object store and its credentials."

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.namespace))
    error_message = "namespace must be a DNS label."
  }
}

variable "server" {
  type        = string
  default     = "minio"
  description = "What serves the store: \"minio\", a MinIO server this module runs (needs only a kubelet and a default StorageClass), or \"rook-objectstore\", an ObjectStore object for a Rook-style operator installed in the cluster."

  validation {
    condition     = contains(["minio", "rook-objectstore"], var.server)
    error_message = "server must be \"minio\" or \"rook-objectstore\"."
  }
}

variable "bucket" {
  type        = string
  default     = ""
  description = "Bucket created for the claim; the store's name when empty."

  validation {
    condition     = var.bucket == "" || can(regex("^[a-z0-9][-a-z0-9.]{1,61}[a-z0-9]$", var.bucket))
    error_message = "bucket must be 3-63 characters of lowercase letters, digits, '-' and '.', starting and ending with a letter or digit."
  }
}

variable "image" {
  type        = string
  default     = "conductor-tf/minio:2026-02-12"
  description = "MinIO server image (server = \"minio\"); its PATH must hold `minio`. The default is the image `make workload-images` builds from the Go module proxy; any MinIO release image works."
}

variable "client_image" {
  type        = string
  default     = "conductor-tf/s3client:v0.1.0"
  description = "Image of the S3 client that creates the bucket (cmd/s3client, built by `make workload-images`)."
}

variable "storage_class_name" {
  type        = string
  default     = null
  description = "StorageClass of the server's volume; the cluster's default when null."
}

variable "memory_limit" {
  type        = string
  default     = "1Gi"
  description = "Memory limit of the server container (a Kubernetes quantity)."
}

variable "ready_timeout" {
  type        = string
  default     = "5m"
  description = "How long an apply waits for the server to answer and for the bucket (a Terraform duration)."
}

variable "node_count" {
  type        = number
  default     = 4
  description = "server = \"rook-objectstore\" only: number of MinIO server nodes the operator runs (distributed mode needs at least 4)."

  validation {
    condition     = var.node_count >= 1 && var.node_count <= 32 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number from 1 to 32."
  }
}

variable "storage_gib" {
  type        = number
  description = "Storage in GiB: the server's one volume (server = \"minio\"), or each node's (server = \"rook-objectstore\")."

  validation {
    condition     = var.storage_gib > 0 && var.storage_gib <= 65536
    error_message = "storage_gib must be more than 0 and at most 65536."
  }
}

variable "access_key" {
  type        = string
  default     = "minio"
  description = "Access key (user name) of the object store's administrator."

  validation {
    condition     = length(var.access_key) >= 3
    error_message = "access_key must be at least 3 characters."
  }
}

variable "secret_key" {
  type        = string
  default     = ""
  sensitive   = true
  description = "Secret key of the administrator; generated when empty. Set it to adopt an existing store's credentials."
}

variable "cluster_domain" {
  type        = string
  default     = "cluster.local"
  description = "DNS domain of the cluster, used in the endpoint."
}

variable "labels" {
  type        = map(string)
  default     = {}
  description = "Labels added to every object the module creates."
}
