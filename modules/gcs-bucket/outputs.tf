output "name" {
  value       = google_storage_bucket.this.name
  description = "Name of the bucket."
}

output "url" {
  value       = google_storage_bucket.this.url
  description = "gs:// URL of the bucket."
}

output "self_link" {
  value       = google_storage_bucket.this.self_link
  description = "API URI of the bucket."
}
