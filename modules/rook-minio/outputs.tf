output "endpoint" {
  value       = "http://${var.name}.${var.namespace}.svc.${var.cluster_domain}:9000"
  description = "S3 endpoint of the object store inside the cluster."
}

output "bucket" {
  # From the variables: outputs are evaluated during an import, before the Job is read.
  value       = local.bucket
  description = "Bucket made for the claim (server = \"minio\"; with an operator, the name the operator is asked for)."
}

output "namespace" {
  value       = kubernetes_namespace_v1.this.metadata[0].name
  description = "Namespace of the object store."
}

output "object_store" {
  # From the variable, not the manifest: outputs are evaluated during an import, before the
  # object's attributes are read.
  value       = var.name
  description = "Name of the server's Deployment and Service, or of the ObjectStore object."
}

output "access_key" {
  value       = var.access_key
  description = "Access key of the administrator."
}

output "secret_key" {
  value       = local.secret_key
  sensitive   = true
  description = "Secret key of the administrator."
}
