output "endpoint" {
  value       = var.endpoint
  description = "S3 endpoint of the object store."
}

output "bucket" {
  value       = kubernetes_job_v1.bucket.spec[0].template[0].spec[0].container[0].env[1].value
  description = "The bucket made (read from the Job that made it)."
}

output "access_key" {
  value       = var.access_key
  description = "Access key of the object store."
}

output "secret_key" {
  value       = var.secret_key
  sensitive   = true
  description = "Secret key of the object store."
}
