output "endpoint" {
  value       = "http://${var.name}.${var.namespace}.svc.${var.cluster_domain}:9000"
  description = "S3 endpoint of the object store inside the cluster."
}

output "namespace" {
  value       = kubernetes_namespace_v1.this.metadata[0].name
  description = "Namespace of the object store."
}

output "object_store" {
  # From the variable, not the manifest: outputs are evaluated during an import, before the
  # object's attributes are read.
  value       = var.name
  description = "Name of the ObjectStore object."
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
