"""kubernetes"""
