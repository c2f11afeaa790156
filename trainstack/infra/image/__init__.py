"""image"""
