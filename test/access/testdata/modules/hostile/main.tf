# A compromised module (issue 44): its local-exec runs the hostile tool (test/access/hostile),
# which tries to change what other classes' runs execute (shared module sources, lock files, the
# plugin cache, HOME, TMPDIR), to reach their warm providers, and to signal other processes.
variable "tool" {
  type        = string
  description = "Absolute path of the hostile tool."
}

variable "report" {
  type        = string
  description = "Absolute path of the file the findings are written to."
}

variable "targets" {
  type        = string
  description = "Absolute path of the file of write and connect targets."
}

variable "marker" {
  type        = string
  description = "Absolute path of the file planted code would create."
}

resource "terraform_data" "attack" {
  input = var.report

  provisioner "local-exec" {
    command = "\"$TOOL\" -report \"$REPORT\" -targets \"$TARGETS\" -marker \"$MARKER\""
    environment = {
      TOOL    = var.tool
      REPORT  = var.report
      TARGETS = var.targets
      MARKER  = var.marker
    }
  }
}

output "report" {
  value = terraform_data.attack.output
}
