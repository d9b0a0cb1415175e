# Writes what a run's processes see of a granted cloud identity: the AWS and Google variables and
# the content of the files they name (nothing for an unset variable).
variable "out" {
  type = string
}

variable "run" {
  type        = string
  description = "Changes per run, so that each apply runs the provisioner again."
}

resource "terraform_data" "probe" {
  triggers_replace = [var.run]

  provisioner "local-exec" {
    command = <<-EOT
      {
        echo "AWS_ROLE_ARN=$AWS_ROLE_ARN"
        echo "AWS_WEB_IDENTITY_TOKEN_FILE=$AWS_WEB_IDENTITY_TOKEN_FILE"
        echo "GOOGLE_APPLICATION_CREDENTIALS=$GOOGLE_APPLICATION_CREDENTIALS"
        if [ -n "$AWS_WEB_IDENTITY_TOKEN_FILE" ]; then cat "$AWS_WEB_IDENTITY_TOKEN_FILE"; echo; fi
        if [ -n "$GOOGLE_APPLICATION_CREDENTIALS" ]; then cat "$GOOGLE_APPLICATION_CREDENTIALS"; echo; fi
      } > "$OUT"
    EOT
    environment = {
      OUT = var.out
    }
  }
}
