# A toolset is imported by its name.
terraform import switchboard_toolset.support support
