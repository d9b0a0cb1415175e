# A create that takes a while and leaves a trace outside Terraform: each time the object is
# created, a line is appended to the ledger file before the create completes. The ledger counts
# creations whatever Terraform's state says (issue 17: interrupted creates).
variable "ledger" {
  type        = string
  description = "Absolute path of the ledger file."
}

variable "name" {
  type        = string
  description = "Name written to the ledger."
}

variable "seconds" {
  type        = number
  default     = 5
  description = "How long a create takes after it is recorded, in seconds."
}

resource "terraform_data" "this" {
  input = var.name

  provisioner "local-exec" {
    command = "echo \"create $NAME\" >> \"$LEDGER\" && sleep $SECONDS"
    environment = {
      NAME    = var.name
      LEDGER  = var.ledger
      SECONDS = tostring(var.seconds)
    }
  }
}

output "name" {
  value = terraform_data.this.output
}
