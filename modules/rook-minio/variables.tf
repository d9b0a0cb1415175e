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

variable "node_count" {
  type        = number
  default     = 4
  description = "Number of MinIO server nodes (distributed mode needs at least 4)."

  validation {
    condition     = var.node_count >= 1 && var.node_count <= 32 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number from 1 to 32."
  }
}

variable "storage_gib" {
  type        = number
  description = "Storage requested for each node, in GiB."

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
