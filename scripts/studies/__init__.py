"""The studies behind the tables of docs/ and the check that the published figures still hold."""
