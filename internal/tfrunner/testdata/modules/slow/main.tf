# Takes a while to apply: for testing that cancellation reaches Terraform and no lock is left.
resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "sleep 20"
  }
}
