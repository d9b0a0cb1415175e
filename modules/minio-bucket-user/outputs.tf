output "endpoint" {
  value       = var.endpoint
  description = "S3 endpoint of the object store."
}

output "bucket" {
  value       = kubernetes_job_v1.user.spec[0].template[0].spec[0].container[0].env[1].value
  description = "The bucket made (read from the Job that made it)."
}

output "access_key" {
  value       = var.bucket
  description = "Access key of the bucket's own user."
}

output "secret_key" {
  value       = random_password.user.result
  sensitive   = true
  description = "Secret key of the bucket's own user."
}
