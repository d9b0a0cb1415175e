# Applies for about three seconds (a provisioner that sleeps): a run whose processes live a while.
variable "run" {
  type        = string
  description = "Changes per run, so that each apply runs the provisioner again."
}

resource "terraform_data" "brief" {
  triggers_replace = [var.run]

  provisioner "local-exec" {
    command = "sleep 3"
  }
}
