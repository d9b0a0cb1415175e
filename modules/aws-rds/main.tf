# An RDS instance with its subnet group and security group. The master password comes in through
# an ephemeral variable and goes to the write-only password_wo: it is in no plan and no state.
locals {
  port = var.engine == "postgres" ? 5432 : 3306
  # The parameter group family of an engine version: postgres16, mysql8.0, mariadb10.11.
  major  = var.engine == "postgres" ? split(".", var.engine_version)[0] : try(join(".", slice(split(".", var.engine_version), 0, 2)), var.engine_version)
  family = "${var.engine}${local.major}"
  tags = merge(var.tags, { "managed-by" = "conductor-tf" })
}

resource "aws_db_subnet_group" "this" {
  name       = var.name
  subnet_ids = var.subnet_ids
  tags       = local.tags
}

# The instance's parameters: the engine family's defaults plus var.parameters.
resource "aws_db_parameter_group" "this" {
  name   = var.name
  family = local.family
  tags   = local.tags

  dynamic "parameter" {
    for_each = var.parameters
    content {
      name         = parameter.key
      value        = parameter.value
      apply_method = "pending-reboot"
    }
  }
}

resource "aws_security_group" "this" {
  name        = "${var.name}-db"
  description = "Database access for ${var.name}"
  vpc_id      = var.vpc_id
  tags        = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "db" {
  for_each          = toset(var.allowed_cidr_blocks)
  security_group_id = aws_security_group.this.id
  cidr_ipv4         = each.value
  from_port         = local.port
  to_port           = local.port
  ip_protocol       = "tcp"
}

resource "aws_db_instance" "this" {
  identifier                = var.name
  engine                    = var.engine
  engine_version            = var.engine_version
  instance_class            = var.instance_class
  allocated_storage         = var.allocated_storage
  storage_encrypted         = true
  multi_az                  = var.multi_az
  backup_window             = var.backup_window
  backup_retention_period   = var.backup_retention_days
  deletion_protection       = var.deletion_protection
  db_subnet_group_name      = aws_db_subnet_group.this.name
  parameter_group_name      = aws_db_parameter_group.this.name
  vpc_security_group_ids    = [aws_security_group.this.id]
  username                  = var.username
  password_wo               = var.master_password
  password_wo_version       = var.master_password_version
  port                      = local.port
  skip_final_snapshot       = !var.deletion_protection
  final_snapshot_identifier = var.deletion_protection ? "${var.name}-final" : null
  tags                      = local.tags
}
