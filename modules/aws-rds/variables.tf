variable "name" {
  type        = string
  description = "Identifier of the DB instance; also names its subnet group and security group."

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,58}[a-z0-9]$", var.name)) && !can(regex("--", var.name))
    error_message = "name must start with a letter, contain lowercase letters, digits and single hyphens, and be at most 60 characters."
  }
}

variable "engine" {
  type        = string
  description = "Database engine."

  validation {
    condition     = contains(["mysql", "postgres", "mariadb"], var.engine)
    error_message = "engine must be one of mysql, postgres, mariadb."
  }
}

variable "engine_version" {
  type        = string
  description = "Engine version, e.g. \"8.0\" for MySQL or \"16\" for PostgreSQL."
}

variable "instance_class" {
  type        = string
  description = "Instance class, e.g. db.t3.medium."

  validation {
    condition     = can(regex("^db\\.[a-z0-9]+\\.[a-z0-9]+$", var.instance_class))
    error_message = "instance_class must look like db.<family>.<size>."
  }
}

variable "allocated_storage" {
  type        = number
  description = "Allocated storage in GiB."

  validation {
    condition     = var.allocated_storage >= 20 && var.allocated_storage <= 65536
    error_message = "allocated_storage must be from 20 to 65536 GiB."
  }
}

variable "multi_az" {
  type        = bool
  default     = false
  description = "Run a standby in another availability zone."
}

variable "backup_window" {
  type        = string
  default     = "03:00-04:00"
  description = "Daily backup window in UTC, hh24:mi-hh24:mi."

  validation {
    condition     = can(regex("^([01][0-9]|2[0-3]):[0-5][0-9]-([01][0-9]|2[0-3]):[0-5][0-9]$", var.backup_window))
    error_message = "backup_window must be hh24:mi-hh24:mi, e.g. 03:00-04:00."
  }
}

variable "backup_retention_days" {
  type        = number
  default     = 7
  description = "Days automated backups are kept (0 disables them)."

  validation {
    condition     = var.backup_retention_days >= 0 && var.backup_retention_days <= 35
    error_message = "backup_retention_days must be from 0 to 35."
  }
}

variable "deletion_protection" {
  type        = bool
  default     = true
  description = "Refuse to delete the instance until this is turned off."
}

variable "vpc_id" {
  type        = string
  description = "VPC the instance and its security group live in."

  validation {
    condition     = can(regex("^vpc-[0-9a-f]+$", var.vpc_id))
    error_message = "vpc_id must be a VPC id (vpc-…)."
  }
}

variable "subnet_ids" {
  type        = list(string)
  description = "Subnets of the DB subnet group, in at least two availability zones."

  validation {
    condition     = length(var.subnet_ids) >= 2 && alltrue([for s in var.subnet_ids : can(regex("^subnet-[0-9a-f]+$", s))])
    error_message = "subnet_ids must list at least two subnet ids (subnet-…)."
  }
}

variable "allowed_cidr_blocks" {
  type        = list(string)
  default     = []
  description = "CIDR blocks allowed to connect to the database port."

  validation {
    condition     = alltrue([for c in var.allowed_cidr_blocks : can(cidrhost(c, 0))])
    error_message = "allowed_cidr_blocks must be CIDR blocks."
  }
}

variable "username" {
  type        = string
  default     = "conductor"
  description = "Master user name."
}

variable "master_password" {
  type        = string
  ephemeral   = true
  sensitive   = true
  description = "Master password: sent to the instance (password_wo), never stored in plan or state. conductor-tf generates it (a class's generatedPasswords)."
}

variable "master_password_version" {
  type        = number
  description = "Changes whenever master_password does (password_wo_version): the password is sent only when it changes."
}

variable "parameters" {
  type        = map(string)
  default     = {}
  description = "Database parameters set in the instance's parameter group (name = value; applied at the next reboot)."
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Tags of every AWS resource the module creates."
}
