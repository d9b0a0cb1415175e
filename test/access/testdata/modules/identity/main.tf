# What a run granted a cloud identity gets: a local-exec that copies its environment and the token
# file AWS_WEB_IDENTITY_TOKEN_FILE names into the report directory, as the AWS SDK would read it.
variable "report" {
  type        = string
  description = "Absolute path of the directory the environment (env) and the token (token) are written to."
}

resource "terraform_data" "probe" {
  input = var.report

  provisioner "local-exec" {
    command = "env > \"$REPORT/env\" && cat \"$AWS_WEB_IDENTITY_TOKEN_FILE\" > \"$REPORT/token\""
    environment = {
      REPORT = var.report
    }
  }
}
