# What a run's processes can see: a local-exec that writes its whole environment to a file outside
# Terraform, as a module that goes looking for credentials would.
variable "report" {
  type        = string
  description = "Absolute path of the file the environment is written to."
}

resource "terraform_data" "probe" {
  input = var.report

  provisioner "local-exec" {
    command = "env > \"$REPORT\""
    environment = {
      REPORT = var.report
    }
  }
}

output "report" {
  value = terraform_data.probe.output
}
