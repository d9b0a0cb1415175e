# One create whose provisioner runs var.command: "exit 3" makes the create fail on its own
# (apply_errored), "sleep 30" gives an interrupt the time to cut it off.
variable "command" {
  type        = string
  description = "The provisioner's command."
}

resource "terraform_data" "this" {
  input = var.command

  provisioner "local-exec" {
    command = var.command
  }
}
