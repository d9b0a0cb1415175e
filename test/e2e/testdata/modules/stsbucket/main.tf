# The e2e suite's workload identity module: one S3 bucket through an S3-compatible endpoint, with
# whatever credentials the AWS SDK's default chain finds. The run is given none but a web identity
# (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE), so the provider first exchanges that token at the
# endpoint's STS (AssumeRoleWithWebIdentity) and uses the temporary credentials it returns.
terraform {
  required_providers {
    aws = {
      source = "hashicorp/aws"
    }
  }
}

variable "endpoint" {
  type        = string
  description = "URL of the S3 and STS endpoint (MinIO serves both on one port)."
}

variable "bucket" {
  type        = string
  description = "Name of the bucket."
}

provider "aws" {
  region                      = "us-east-1"
  s3_use_path_style           = true
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
  endpoints {
    s3  = var.endpoint
    sts = var.endpoint
  }
}

resource "aws_s3_bucket" "this" {
  bucket        = var.bucket
  force_destroy = true
}

output "bucket" {
  value = aws_s3_bucket.this.bucket
}
