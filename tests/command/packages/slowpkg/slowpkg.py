VALUE = "slow"
