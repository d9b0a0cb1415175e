output "endpoint" {
  value       = aws_db_instance.this.address
  description = "Host name of the instance."
}

output "port" {
  value       = aws_db_instance.this.port
  description = "Port the database listens on."
}

output "username" {
  value       = aws_db_instance.this.username
  description = "Master user name."
}
